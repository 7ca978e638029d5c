//! The ONNX file format: the protocol-buffer messages kfoundry reads, declared with prost's
//! derive from `onnx.proto3` (same field numbers; fields kfoundry never reads are left out and
//! skipped on decoding, so files that use them still load).
//!
//! The same types encode, which the tests use to build graphs operator by operator.

use std::path::Path;

use prost::Message;

#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    #[prost(string, tag = "2")]
    pub producer_name: String,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct OperatorSetIdProto {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(int64, tag = "2")]
    pub version: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(string, tag = "7")]
    pub domain: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
}

/// `AttributeProto.AttributeType`.
pub mod attribute_type {
    pub const FLOAT: i32 = 1;
    pub const INT: i32 = 2;
    pub const STRING: i32 = 3;
    pub const TENSOR: i32 = 4;
    pub const FLOATS: i32 = 6;
    pub const INTS: i32 = 7;
}

#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int32, tag = "20")]
    pub r#type: i32,
    #[prost(float, tag = "2")]
    pub f: f32,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueInfoProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TensorTypeProto>,
}

/// `TypeProto.Tensor`.
#[derive(Clone, PartialEq, Message)]
pub struct TensorTypeProto {
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `TensorShapeProto.Dimension`: a value, a symbolic name, or neither (unknown).
#[derive(Clone, PartialEq, Message)]
pub struct Dimension {
    #[prost(int64, optional, tag = "1")]
    pub dim_value: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub dim_param: Option<String>,
}

/// `TensorProto.DataType` values kfoundry reads.
pub mod data_type {
    pub const FLOAT: i32 = 1;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const BOOL: i32 = 9;
    pub const DOUBLE: i32 = 11;

    /// Every integer type, and booleans: read as `i64`.
    pub fn is_integer(t: i32) -> bool {
        matches!(t, 2..=7 | 9 | 12 | 13)
    }

    /// Bytes an element of type `t` takes in raw data (None: a type of no fixed size).
    pub fn size(t: i32) -> Option<u64> {
        match t {
            2 | 3 | 9 => Some(1),
            4 | 5 | 10 | 16 => Some(2),
            1 | 6 | 12 => Some(4),
            7 | 11 | 13 => Some(8),
            _ => None,
        }
    }

    pub fn name(t: i32) -> &'static str {
        match t {
            1 => "float32",
            2 => "uint8",
            3 => "int8",
            4 => "uint16",
            5 => "int16",
            6 => "int32",
            7 => "int64",
            8 => "string",
            9 => "bool",
            10 => "float16",
            11 => "float64",
            16 => "bfloat16",
            _ => "another type",
        }
    }
}

#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    #[prost(uint64, repeated, tag = "11")]
    pub uint64_data: Vec<u64>,
    /// Where the data is when `data_location` is EXTERNAL: `location` (a file beside the model),
    /// `offset` and `length` in bytes.
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    /// `DataLocation`: 1 = EXTERNAL (the data is in another file).
    #[prost(int32, tag = "14")]
    pub data_location: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct StringStringEntryProto {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// The most external data a model may read in all (the largest models imported are a few GiB).
pub const MAX_EXTERNAL_BYTES: u64 = 64 << 30;

/// Whether any tensor of the model keeps its data in another file.
pub fn has_external_data(model: &ModelProto) -> bool {
    model.graph.as_ref().is_some_and(|g| {
        g.initializer.iter().any(|t| t.data_location == 1)
            || g.node.iter().any(|n| {
                n.attribute
                    .iter()
                    .any(|a| a.t.as_ref().is_some_and(|t| t.data_location == 1))
            })
    })
}

/// Reads the data of every tensor the model stores in external files (initializers and
/// `Constant` values) into the tensor. A file must lie inside `dir` (the model's folder): a
/// location that is absolute, climbs out with `..`, or resolves (through links) outside it is
/// refused, as is anything that is not a regular file or a region past a file's end.
pub fn load_external(model: &mut ModelProto, dir: &Path) -> Result<(), String> {
    let Some(graph) = model.graph.as_mut() else {
        return Ok(());
    };
    let root = dir
        .canonicalize()
        .map_err(|e| format!("the model's folder {}: {e}", dir.display()))?;
    // What all external tensors may add up to (a small model whose tensors all name one large
    // region would otherwise allocate it once per tensor).
    let mut budget: u64 = MAX_EXTERNAL_BYTES;
    let mut tensors: Vec<&mut TensorProto> = graph.initializer.iter_mut().collect();
    for node in &mut graph.node {
        tensors.extend(node.attribute.iter_mut().filter_map(|a| a.t.as_mut()));
    }
    for t in tensors {
        if t.data_location != 1 {
            continue;
        }
        let what = |m: String| format!("tensor `{}`: {m}", crate::text::printable(&t.name, 80));
        let get = |key: &str| {
            t.external_data
                .iter()
                .find(|e| e.key == key)
                .map(|e| e.value.clone())
        };
        let location =
            get("location").ok_or_else(|| what("external data without a location".into()))?;
        let relative = Path::new(&location);
        if location.is_empty()
            || !relative
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return Err(what(format!(
                "external data at {location:?}: only a file inside the model's folder is read"
            )));
        }
        let path = root
            .join(relative)
            .canonicalize()
            .map_err(|e| what(format!("external data {location:?}: {e}")))?;
        if !path.starts_with(&root) {
            return Err(what(format!(
                "external data {location:?} resolves outside the model's folder"
            )));
        }
        let number = |key: &str| -> Result<Option<u64>, String> {
            get(key)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| what(format!("external data {key} {v:?} is not a number")))
                })
                .transpose()
        };
        let mut file =
            std::fs::File::open(&path).map_err(|e| what(format!("{}: {e}", path.display())))?;
        // The file opened is the one checked (a link swapped in between is refused).
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
                if !opened.starts_with(&root) {
                    return Err(what(format!(
                        "external data {location:?} resolves outside the model's folder"
                    )));
                }
            }
        }
        let meta = file
            .metadata()
            .map_err(|e| what(format!("{}: {e}", path.display())))?;
        if !meta.is_file() {
            return Err(what(format!("{} is not a regular file", path.display())));
        }
        let offset = number("offset")?.unwrap_or(0);
        let length = match number("length")? {
            Some(l) => l,
            None => meta.len().checked_sub(offset).ok_or_else(|| {
                what(format!(
                    "offset {offset} is past the end of {}",
                    path.display()
                ))
            })?,
        };
        if offset
            .checked_add(length)
            .is_none_or(|end| end > meta.len())
        {
            return Err(what(format!(
                "bytes {offset}..{offset}+{length} are past the end of {} ({} bytes)",
                path.display(),
                meta.len()
            )));
        }
        // The region holds exactly the tensor's elements.
        if let (Some(n), Some(size)) = (t.element_count(), data_type::size(t.data_type)) {
            if (n as u64).checked_mul(size) != Some(length) {
                return Err(what(format!(
                    "{length} bytes of external data where its dims {:?} of {} need {}",
                    t.dims,
                    data_type::name(t.data_type),
                    n as u64 * size
                )));
            }
        }
        budget = budget.checked_sub(length).ok_or_else(|| {
            what(format!(
                "the model's external data passes {} GiB in all",
                MAX_EXTERNAL_BYTES >> 30
            ))
        })?;
        let mut raw = vec![0u8; usize::try_from(length).map_err(|_| what("too large".into()))?];
        use std::io::{Read, Seek};
        file.seek(std::io::SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut raw))
            .map_err(|e| what(format!("{}: {e}", path.display())))?;
        t.raw_data = raw;
        t.data_location = 0;
        t.external_data.clear();
    }
    Ok(())
}

/// Decodes a model file's bytes.
pub fn decode(bytes: &[u8]) -> Result<ModelProto, prost::DecodeError> {
    ModelProto::decode(bytes)
}

/// Encodes a model (the tests build their graphs with this).
pub fn encode(model: &ModelProto) -> Vec<u8> {
    model.encode_to_vec()
}

impl TensorProto {
    /// The number of elements the dims describe (1 for a scalar), if it fits.
    pub fn element_count(&self) -> Option<usize> {
        self.dims.iter().try_fold(1usize, |acc, &d| {
            usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
        })
    }

    /// The values as `f32` (float32 and float64 tensors), checked against the dims.
    pub fn floats(&self) -> Result<Vec<f32>, String> {
        let n = self
            .element_count()
            .ok_or("its dims are negative or too large")?;
        if self.data_location == 1 {
            return Err(
                "its data is in an external file, and no folder to read it from was given".into(),
            );
        }
        let values: Vec<f32> = match self.data_type {
            data_type::FLOAT if !self.raw_data.is_empty() => self
                .raw_data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            data_type::FLOAT => self.float_data.clone(),
            data_type::DOUBLE if !self.raw_data.is_empty() => self
                .raw_data
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("chunks of 8")) as f32)
                .collect(),
            data_type::DOUBLE => self.double_data.iter().map(|&v| v as f32).collect(),
            t => {
                return Err(format!(
                    "it holds {} (float32 or float64 expected)",
                    data_type::name(t)
                ))
            }
        };
        if values.len() != n {
            return Err(format!(
                "it holds {} value(s) where its dims {:?} need {n}",
                values.len(),
                self.dims
            ));
        }
        Ok(values)
    }

    /// The values as `i64` (int64 and int32 tensors: shapes, axes, pads), checked against the dims.
    pub fn ints(&self) -> Result<Vec<i64>, String> {
        let n = self
            .element_count()
            .ok_or("its dims are negative or too large")?;
        let raw = !self.raw_data.is_empty();
        let values: Vec<i64> = match self.data_type {
            data_type::INT64 if raw => self
                .raw_data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("chunks of 8")))
                .collect(),
            data_type::INT64 => self.int64_data.clone(),
            // uint64: values above i64::MAX are refused rather than wrapped
            13 if raw => self
                .raw_data
                .chunks_exact(8)
                .map(|c| {
                    i64::try_from(u64::from_le_bytes(c.try_into().expect("chunks of 8")))
                        .map_err(|_| "a uint64 value above 2^63".to_string())
                })
                .collect::<Result<_, _>>()?,
            data_type::INT32 if raw => self
                .raw_data
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            12 if raw => self
                .raw_data
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            4 if raw => self
                .raw_data
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]) as i64)
                .collect(),
            5 if raw => self
                .raw_data
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]) as i64)
                .collect(),
            3 if raw => self.raw_data.iter().map(|&c| c as i8 as i64).collect(),
            2 | data_type::BOOL if raw => self.raw_data.iter().map(|&c| c as i64).collect(),
            // the small types are stored widened in int32_data; uint32 and uint64 in uint64_data
            2..=6 | data_type::BOOL => self.int32_data.iter().map(|&v| v as i64).collect(),
            12 | 13 => self
                .uint64_data
                .iter()
                .map(|&v| i64::try_from(v).map_err(|_| "a uint64 value above 2^63".to_string()))
                .collect::<Result<_, _>>()?,
            t => {
                return Err(format!(
                    "it holds {} (an integer type expected)",
                    data_type::name(t)
                ))
            }
        };
        if values.len() != n {
            return Err(format!(
                "it holds {} value(s) where its dims {:?} need {n}",
                values.len(),
                self.dims
            ));
        }
        Ok(values)
    }
}
