//! Element types the typed API accepts, viewed as bytes for the wire.

use half::{bf16, f16};
use railyard_schedule::Dtype;

/// A plain-old-data element: no padding, every bit pattern valid.
pub trait Element: Copy + Send + Sync + 'static {
    const DTYPE: Dtype;

    fn as_bytes(v: &[Self]) -> &[u8] {
        // SAFETY: implementors are primitive numbers without padding; any initialised
        // value is a valid sequence of bytes, and u8 has alignment 1.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
    }

    fn as_bytes_mut(v: &mut [Self]) -> &mut [u8] {
        // SAFETY: as above; and every byte pattern written back is a valid value of these types.
        unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
    }
}

macro_rules! element {
    ($t:ty, $d:expr) => {
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
