//! The memory of a numpy array or a CPU torch tensor, checked for the runtime: a
//! supported dtype, native byte order, C-contiguous, writable where written, its address
//! and byte length. numpy arrays are read from their C struct (no Python calls: this is
//! the per-call cost `bench/python_overhead.py` measures); torch tensors through their
//! public methods (`data_ptr`, `nbytes`, `is_contiguous`, ...), as torch has no stable C
//! layout to read.

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;
use railyard_schedule::Dtype;

use crate::value_error;

/// A buffer's address and byte length.
#[derive(Clone, Copy)]
pub struct Raw {
    pub addr: usize,
    pub bytes: usize,
}

impl Raw {
    pub const EMPTY: Raw = Raw { addr: 0, bytes: 0 };

    fn end(self) -> usize {
        self.addr.saturating_add(self.bytes)
    }
    pub fn overlaps(self, other: Raw) -> bool {
        self.bytes > 0 && other.bytes > 0 && self.addr < other.end() && other.addr < self.end()
    }
}

/// An array's or tensor's data, checked for the runtime.
#[derive(Clone, Copy)]
pub struct Buffer {
    pub raw: Raw,
    pub dtype: Dtype,
}

const NPY_ARRAY_WRITEABLE: std::os::raw::c_int = 0x0400;

/// `object` (a numpy array or a CPU torch tensor) as a buffer.
pub fn buffer(object: &Bound<'_, PyAny>, field: &str, writable: bool) -> PyResult<Buffer> {
    match object.downcast::<PyUntypedArray>() {
        Ok(array) => numpy_buffer(array, field, writable),
        Err(_) => tensor_buffer(object, field),
    }
}

fn numpy_buffer(a: &Bound<'_, PyUntypedArray>, field: &str, writable: bool) -> PyResult<Buffer> {
    let descr = a.dtype();
    let dtype = match (descr.kind(), descr.itemsize()) {
        (b'f', 4) => Dtype::F32,
        (b'f', 8) => Dtype::F64,
        (b'f', 2) => Dtype::F16,
        (b'i', 4) => Dtype::I32,
        (b'i', 8) => Dtype::I64,
        (b'u', 1) => Dtype::U8,
        _ => {
            return Err(PyTypeError::new_err(format!(
                "{field}: dtype {} is not supported (float32, float64, float16, int32, int64, uint8; bfloat16 as a torch tensor)",
                descr
            )))
        }
    };
    if !matches!(descr.byteorder(), b'=' | b'|' | b'<') || cfg!(target_endian = "big") {
        return Err(value_error(field, "byte order is not the machine's"));
    }
    if !a.is_c_contiguous() {
        return Err(value_error(field, "the array is not C-contiguous; pass np.ascontiguousarray(...)"));
    }
    // SAFETY: `a` is a numpy array (checked by the downcast to PyUntypedArray), so its
    // object is a PyArrayObject whose fields the numpy crate's FFI struct describes.
    let (data, flags) = unsafe {
        let p = a.as_array_ptr();
        ((*p).data as usize, (*p).flags)
    };
    if writable && flags & NPY_ARRAY_WRITEABLE == 0 {
        return Err(value_error(field, "the array is read-only"));
    }
    let bytes = a.len().checked_mul(descr.itemsize()).ok_or_else(|| value_error(field, "too large"))?;
    if bytes > 0 && data == 0 {
        return Err(value_error(field, "null data"));
    }
    Ok(Buffer { raw: Raw { addr: data, bytes }, dtype })
}

/// `torch.Tensor`, `torch.nn.Parameter` and the torch dtypes the runtime reduces, looked
/// up once.
struct Torch {
    tensor: Py<PyType>,
    parameter: Py<PyType>,
    strided: PyObject,
    dtypes: Vec<(PyObject, Dtype)>,
}

static TORCH: GILOnceCell<Torch> = GILOnceCell::new();

/// The dtypes by torch's names.
const TORCH_DTYPES: [(&str, Dtype); 7] = [
    ("float32", Dtype::F32),
    ("float64", Dtype::F64),
    ("float16", Dtype::F16),
    ("bfloat16", Dtype::Bf16),
    ("int32", Dtype::I32),
    ("int64", Dtype::I64),
    ("uint8", Dtype::U8),
];

/// torch's types, once torch is imported (an object cannot be a tensor before).
fn torch(py: Python<'_>) -> PyResult<&'static Torch> {
    TORCH.get_or_try_init(py, || {
        let torch = py.import("sys")?.getattr("modules")?.get_item("torch")?;
        let tensor = torch.getattr("Tensor")?.downcast_into::<PyType>()?.unbind();
        let parameter = torch.getattr("nn")?.getattr("Parameter")?.downcast_into::<PyType>()?.unbind();
        let dtypes = TORCH_DTYPES
            .iter()
            .map(|&(name, d)| Ok((torch.getattr(name)?.unbind(), d)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Torch { tensor, parameter, strided: torch.getattr("strided")?.unbind(), dtypes })
    })
}

/// A torch tensor's memory. Only `torch.Tensor` and `torch.nn.Parameter` themselves are
/// read: their `data_ptr`, `nbytes` and the rest are torch's C methods, where a subclass
/// could override them and have railyard write anywhere. Torch records no read-only flag
/// (`torch.frombuffer` of `bytes` warns and writes through), so `writable` is not checked.
fn tensor_buffer(t: &Bound<'_, PyAny>, field: &str) -> PyResult<Buffer> {
    let not_a_buffer = || {
        PyTypeError::new_err(format!(
            "{field}: expected a numpy array or a CPU torch tensor, got {}",
            t.get_type().name().map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    };
    // Without torch imported nothing can be a tensor.
    let py = t.py();
    let torch = torch(py).map_err(|_| not_a_buffer())?;
    let kind = t.get_type();
    if !(kind.is(torch.tensor.bind(py)) || kind.is(torch.parameter.bind(py))) {
        if t.is_instance(torch.tensor.bind(py))? {
            return Err(PyTypeError::new_err(format!(
                "{field}: a torch.Tensor subclass ({}): pass a plain tensor (t.as_subclass(torch.Tensor))",
                kind.name().map_or_else(|_| "?".to_string(), |n| n.to_string())
            )));
        }
        return Err(not_a_buffer());
    }
    if !t.getattr(intern!(py, "is_cpu"))?.is_truthy()? {
        let device = t.getattr("device").and_then(|d| d.str()).map_or_else(|_| "?".to_string(), |d| d.to_string());
        return Err(PyTypeError::new_err(format!(
            "{field}: a tensor on {device}: railyard runs collectives on CPU tensors; for GPU tensors use NCCL, \
             in a group of its own (dist.new_group(backend=\"nccl\"))"
        )));
    }
    if !t.getattr(intern!(py, "layout"))?.is(torch.strided.bind(py)) {
        return Err(value_error(field, "a sparse tensor; pass a dense one (t.to_dense())"));
    }
    let dtype_object = t.getattr(intern!(py, "dtype"))?;
    let dtype = torch.dtypes.iter().find(|(d, _)| d.bind(py).is(&dtype_object)).map(|&(_, d)| d).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{field}: dtype {} is not supported (float32, float64, float16, bfloat16, int32, int64, uint8)",
            dtype_object.str().map_or_else(|_| "?".to_string(), |s| s.to_string())
        ))
    })?;
    if !t.call_method0(intern!(py, "is_contiguous"))?.is_truthy()? {
        return Err(value_error(field, "the tensor is not contiguous; pass t.contiguous()"));
    }
    // A view with the negative bit set (the imaginary part of a conjugate) holds the
    // values un-negated: its memory is not its value.
    if t.call_method0(intern!(py, "is_neg"))?.is_truthy()? {
        return Err(value_error(field, "a view with the negative bit set; pass t.resolve_neg()"));
    }
    let addr: usize = t.call_method0(intern!(py, "data_ptr"))?.extract()?;
    let bytes: usize = t.getattr(intern!(py, "nbytes"))?.extract()?;
    if bytes > 0 && addr == 0 {
        return Err(value_error(field, "null data"));
    }
    Ok(Buffer { raw: Raw { addr, bytes }, dtype })
}
