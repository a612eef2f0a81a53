//! Element-wise reductions on raw buffers, for every dtype and op (every dtype the schedule crate names: f32, f64,
//! f16, bf16, i32, i64, u8; sum, prod, min, max, avg). Buffers are byte slices in native
//! byte order; loops are plain so the compiler can vectorise them.

use std::str::FromStr;

use half::{bf16, f16};
use railyard_schedule::Dtype;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedOp {
    Sum,
    Prod,
    Min,
    Max,
    /// Sum, then divided by the rank count once at the end.
    Avg,
}

impl RedOp {
    pub const ALL: [RedOp; 5] = [RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg];

    pub fn as_str(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Min => "min",
            RedOp::Max => "max",
            RedOp::Avg => "avg",
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }
}

impl FromStr for RedOp {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        RedOp::ALL
            .into_iter()
            .find(|o| o.as_str() == text)
            .ok_or_else(|| format!("unknown op \"{text}\" (expected sum, prod, min, max, avg)"))
    }
}

macro_rules! combine {
    ($t:ty, $dst:expr, $src:expr, $op:expr, $from:expr, $to:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (d, s) in $dst.chunks_exact_mut(N).zip($src.chunks_exact(N)) {
            let a: $t = $from(d.try_into().expect("chunks_exact gives N bytes"));
            let b: $t = $from(s.try_into().expect("chunks_exact gives N bytes"));
            let r: $t = match $op {
                RedOp::Sum | RedOp::Avg => a + b,
                RedOp::Prod => a * b,
                // A NaN on either side wins, whatever the order ranks combine in
                // (as numpy's minimum/maximum): every rank gets the same answer.
                #[allow(clippy::eq_op)]
                RedOp::Min => {
                    if b < a || b != b {
                        b
                    } else {
                        a
                    }
                }
                #[allow(clippy::eq_op)]
                RedOp::Max => {
                    if b > a || b != b {
                        b
                    } else {
                        a
                    }
                }
            };
            d.copy_from_slice(&$to(r));
        }
    }};
}

macro_rules! combine_int {
    ($t:ty, $dst:expr, $src:expr, $op:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (d, s) in $dst.chunks_exact_mut(N).zip($src.chunks_exact(N)) {
            let a = <$t>::from_ne_bytes(d.try_into().expect("N bytes"));
            let b = <$t>::from_ne_bytes(s.try_into().expect("N bytes"));
            // Integers wrap, as NCCL's do.
            let r = match $op {
                RedOp::Sum | RedOp::Avg => a.wrapping_add(b),
                RedOp::Prod => a.wrapping_mul(b),
                RedOp::Min => a.min(b),
                RedOp::Max => a.max(b),
            };
            d.copy_from_slice(&r.to_ne_bytes());
        }
    }};
}

/// Typed fast path: when both byte slices are aligned for T, reduce them as `&[T]` in a
/// plain zip loop that the compiler vectorises. Returns false when they are not aligned.
fn typed<T: Copy>(dst: &mut [u8], src: &[u8], f: impl Fn(T, T) -> T) -> bool {
    // SAFETY: `align_to` only hands out the middle part when it is properly aligned and
    // sized for T; T is a primitive number for which every bit pattern is valid.
    let (dp, d, ds) = unsafe { dst.align_to_mut::<T>() };
    // SAFETY: as above, for the source.
    let (sp, s, ss) = unsafe { src.align_to::<T>() };
    if !(dp.is_empty() && ds.is_empty() && sp.is_empty() && ss.is_empty()) {
        return false;
    }
    for (a, &b) in d.iter_mut().zip(s) {
        *a = f(*a, b);
    }
    true
}

fn typed_op<T: Copy + PartialOrd>(
    dst: &mut [u8],
    src: &[u8],
    op: RedOp,
    add: fn(T, T) -> T,
    mul: fn(T, T) -> T,
) -> bool {
    match op {
        RedOp::Sum | RedOp::Avg => typed(dst, src, add),
        RedOp::Prod => typed(dst, src, mul),
        // `b != b` is a NaN (floats only): it wins whichever side it is on, so the result
        // does not depend on the order ranks combine in.
        #[allow(clippy::eq_op)]
        RedOp::Min => typed::<T>(dst, src, |a, b| if b < a || b != b { b } else { a }),
        #[allow(clippy::eq_op)]
        RedOp::Max => typed::<T>(dst, src, |a, b| if b > a || b != b { b } else { a }),
    }
}

/// dst := dst (op) src, element-wise. Both slices hold whole elements of `dtype`.
pub fn reduce_into(dtype: Dtype, op: RedOp, dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    let fast = match dtype {
        Dtype::F32 => typed_op::<f32>(dst, src, op, |a, b| a + b, |a, b| a * b),
        Dtype::F64 => typed_op::<f64>(dst, src, op, |a, b| a + b, |a, b| a * b),
        Dtype::I32 => typed_op::<i32>(dst, src, op, i32::wrapping_add, i32::wrapping_mul),
        Dtype::I64 => typed_op::<i64>(dst, src, op, i64::wrapping_add, i64::wrapping_mul),
        Dtype::U8 => typed_op::<u8>(dst, src, op, u8::wrapping_add, u8::wrapping_mul),
        Dtype::F16 | Dtype::Bf16 => false,
    };
    if fast {
        return;
    }
    match dtype {
        Dtype::F32 => combine!(f32, dst, src, op, f32::from_ne_bytes, f32::to_ne_bytes),
        Dtype::F64 => combine!(f64, dst, src, op, f64::from_ne_bytes, f64::to_ne_bytes),
        Dtype::F16 => combine!(f16, dst, src, op, f16::from_ne_bytes, f16::to_ne_bytes),
        Dtype::Bf16 => combine!(bf16, dst, src, op, bf16::from_ne_bytes, bf16::to_ne_bytes),
        Dtype::I32 => combine_int!(i32, dst, src, op),
        Dtype::I64 => combine_int!(i64, dst, src, op),
        Dtype::U8 => combine_int!(u8, dst, src, op),
    }
}

/// Divide every element by `n` (the avg op's last step; integers divide and truncate).
pub fn divide(dtype: Dtype, buf: &mut [u8], n: usize) {
    macro_rules! div_float {
        ($t:ty, $from:expr, $to:expr, $n:expr) => {
            for d in buf.chunks_exact_mut(std::mem::size_of::<$t>()) {
                let a: $t = $from(d.try_into().expect("element bytes"));
                d.copy_from_slice(&$to(a / $n));
            }
        };
    }
    match dtype {
        Dtype::F32 => div_float!(f32, f32::from_ne_bytes, f32::to_ne_bytes, n as f32),
        Dtype::F64 => div_float!(f64, f64::from_ne_bytes, f64::to_ne_bytes, n as f64),
        Dtype::F16 => div_float!(f16, f16::from_ne_bytes, f16::to_ne_bytes, f16::from_f32(n as f32)),
        Dtype::Bf16 => div_float!(bf16, bf16::from_ne_bytes, bf16::to_ne_bytes, bf16::from_f32(n as f32)),
        Dtype::I32 => div_float!(i32, i32::from_ne_bytes, i32::to_ne_bytes, n as i32),
        Dtype::I64 => div_float!(i64, i64::from_ne_bytes, i64::to_ne_bytes, n as i64),
        // 256 ranks or more: every u8 is below n, so each quotient is 0 (`n as u8` would
        // be a division by zero at 256).
        Dtype::U8 if n > usize::from(u8::MAX) => buf.fill(0),
        Dtype::U8 => div_float!(u8, u8::from_ne_bytes, u8::to_ne_bytes, n as u8),
    }
}

#[cfg(test)]
mod tests {
    /// u8's avg at 256 ranks and more divides by n, not by `n as u8` (0: a panic).
    #[test]
    fn u8_avg_over_256_ranks_is_zero_not_a_panic() {
        let mut buf = [255u8, 7, 0];
        super::divide(railyard_schedule::Dtype::U8, &mut buf, 256);
        assert_eq!(buf, [0, 0, 0]);
        let mut buf = [255u8, 7];
        super::divide(railyard_schedule::Dtype::U8, &mut buf, 255);
        assert_eq!(buf, [1, 0]);
    }

    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn a_nan_wins_min_and_max_from_either_side() {
        for op in [RedOp::Min, RedOp::Max] {
            for (a, b) in [(f32::NAN, 1.0), (1.0, f32::NAN)] {
                let mut d = f32s(&[a]);
                reduce_into(Dtype::F32, op, &mut d, &f32s(&[b]));
                assert!(f32::from_ne_bytes(d[..4].try_into().unwrap()).is_nan(), "{op:?} {a} {b}");
                let mut d = f16::from_f32(a).to_ne_bytes().to_vec();
                reduce_into(Dtype::F16, op, &mut d, &f16::from_f32(b).to_ne_bytes());
                assert!(f16::from_ne_bytes(d[..2].try_into().unwrap()).is_nan(), "f16 {op:?} {a} {b}");
            }
        }
    }

    #[test]
    fn every_op_on_f32_and_ints() {
        let cases = [(RedOp::Sum, 5.0), (RedOp::Prod, 6.0), (RedOp::Min, 2.0), (RedOp::Max, 3.0), (RedOp::Avg, 5.0)];
        for (op, want) in cases {
            let mut d = f32s(&[2.0]);
            reduce_into(Dtype::F32, op, &mut d, &f32s(&[3.0]));
            assert_eq!(f32::from_ne_bytes(d[..4].try_into().unwrap()), want, "{op:?}");
        }
        let mut d = 250u8.to_ne_bytes().to_vec();
        reduce_into(Dtype::U8, RedOp::Sum, &mut d, &10u8.to_ne_bytes());
        assert_eq!(d[0], 4, "u8 sums wrap");
        let mut d = f16::from_f32(1.5).to_ne_bytes().to_vec();
        reduce_into(Dtype::F16, RedOp::Sum, &mut d, &f16::from_f32(2.0).to_ne_bytes());
        assert_eq!(f16::from_ne_bytes([d[0], d[1]]).to_f32(), 3.5);
        let mut d = f32s(&[9.0, 3.0]);
        divide(Dtype::F32, &mut d, 3);
        assert_eq!(d, f32s(&[3.0, 1.0]));
    }
}
