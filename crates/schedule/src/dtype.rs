//! Element types of the buffers (f32, f64, f16, bf16, i32, i64, u8: NCCL's
//! common types, docs/sources.md#nccl-tuner).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    F64,
    F16,
    Bf16,
    I32,
    I64,
    U8,
}

impl Dtype {
    pub const ALL: [Dtype; 7] = [Dtype::F32, Dtype::F64, Dtype::F16, Dtype::Bf16, Dtype::I32, Dtype::I64, Dtype::U8];

    pub fn size_bytes(self) -> u64 {
        match self {
            Dtype::F64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::U8 => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
            Dtype::U8 => "u8",
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Dtype {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.to_ascii_lowercase();
        let alias = match t.as_str() {
            "float" | "float32" => "f32",
            "double" | "float64" => "f64",
            "half" | "float16" => "f16",
            "bfloat16" => "bf16",
            "int" | "int32" => "i32",
            "int64" => "i64",
            "uint8" | "byte" => "u8",
            other => other,
        };
        Dtype::ALL
            .into_iter()
            .find(|d| d.as_str() == alias)
            .ok_or_else(|| format!("unknown dtype \"{text}\" (expected f32, f64, f16, bf16, i32, i64, u8)"))
    }
}
