//! Element types the typed API accepts, viewed as bytes for the wire.

use half::{bf16, f16};
use railyard_schedule::Dtype;

mod sealed {
    /// Implemented only here: `Element`'s byte views are sound only for the types below.
    pub trait Sealed {}
}

/// A plain-old-data element: no padding, every bit pattern valid. Sealed: only the
/// numeric types below implement it, because viewing a value as bytes (and writing any
/// bytes back) is sound only for them — a user type with padding or a `bool` field would
/// be undefined behaviour through these safe methods.
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    const DTYPE: Dtype;

    fn as_bytes(v: &[Self]) -> &[u8] {
        // SAFETY: the trait is sealed and implemented only for primitive numbers without
        // padding (`elements_are_plain_numbers` checks sizes); any initialised value is a
        // valid sequence of bytes, and u8 has alignment 1.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
    }

    fn as_bytes_mut(v: &mut [Self]) -> &mut [u8] {
        // SAFETY: as above; and every byte pattern written back is a valid value of these types.
        unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
    }
}

macro_rules! element {
    ($t:ty, $d:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: Dtype = $d;
        }
    };
}

element!(f32, Dtype::F32);
element!(f64, Dtype::F64);
element!(f16, Dtype::F16);
element!(bf16, Dtype::Bf16);
element!(i32, Dtype::I32);
element!(i64, Dtype::I64);
element!(u8, Dtype::U8);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every implementor's size is its dtype's (no padding) and bytes round-trip.
    #[test]
    fn elements_are_plain_numbers() {
        fn check<T: Element + PartialEq + std::fmt::Debug>(v: T) {
            assert_eq!(std::mem::size_of::<T>() as u64, T::DTYPE.size_bytes(), "{:?}", T::DTYPE);
            let mut back = [v, v];
            let bytes = T::as_bytes(&back).to_vec();
            assert_eq!(bytes.len(), 2 * std::mem::size_of::<T>());
            T::as_bytes_mut(&mut back).copy_from_slice(&bytes);
            assert_eq!(back, [v, v]);
        }
        check(1.5f32);
        check(-2.25f64);
        check(f16::from_f32(0.5));
        check(bf16::from_f32(3.0));
        check(-7i32);
        check(1i64 << 40);
        check(200u8);
        assert_eq!(f32::as_bytes(&[1.0f32]), &1.0f32.to_le_bytes());
    }
}
