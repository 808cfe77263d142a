// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The ONNX messages the compiler reads, declared for `prost`.
//!
//! Only the fields the compiler uses are declared; protobuf skips the
//! others when decoding. The field numbers and types are those of the ONNX
//! IR specification (`onnx.proto`, IR version 3 and later); `prost` does
//! all of the wire-format parsing. The same types write the test models.

#![allow(missing_docs)]

use prost::Message;

/// `ModelProto`.
#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(string, tag = "2")]
    pub producer_name: String,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
}

/// `OperatorSetIdProto`.
#[derive(Clone, PartialEq, Message)]
pub struct OperatorSetIdProto {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `GraphProto`.
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

/// `NodeProto`.
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
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    #[prost(string, tag = "7")]
    pub domain: String,
}

/// `AttributeProto` (the scalar and list kinds the compiler reads).
#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
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
    /// `AttributeType`: 1 FLOAT, 2 INT, 3 STRING, 4 TENSOR, 6 FLOATS, 7 INTS.
    #[prost(int32, tag = "20")]
    pub r#type: i32,
}

/// `TensorProto.DataType` FLOAT.
pub const FLOAT: i32 = 1;
/// `TensorProto.DataType` INT64.
pub const INT64: i32 = 7;
/// `TensorProto.DataType` FLOAT16.
pub const FLOAT16: i32 = 10;

/// `AttributeType` codes.
pub mod attr_type {
    pub const FLOAT: i32 = 1;
    pub const INT: i32 = 2;
    pub const INTS: i32 = 7;
}

/// `TensorProto` (dense data only).
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
}

/// `ValueInfoProto`.
#[derive(Clone, PartialEq, Message)]
pub struct ValueInfoProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// `TypeProto` (tensor types only).
#[derive(Clone, PartialEq, Message)]
pub struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TypeProtoTensor>,
}

/// `TypeProto.Tensor`.
#[derive(Clone, PartialEq, Message)]
pub struct TypeProtoTensor {
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// `TensorShapeProto`.
#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `TensorShapeProto.Dimension`: a value or a symbolic name.
#[derive(Clone, PartialEq, Message)]
pub struct Dimension {
    #[prost(oneof = "dimension::Value", tags = "1, 2")]
    pub value: Option<dimension::Value>,
}

/// The `Dimension` oneof.
pub mod dimension {
    /// `dim_value` or `dim_param`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(int64, tag = "1")]
        DimValue(i64),
        #[prost(string, tag = "2")]
        DimParam(String),
    }
}

impl TensorProto {
    /// The elements as f32 (FLOAT from float_data or raw_data, FLOAT16
    /// from raw_data or int32_data, INT64 converted), or why not.
    pub fn to_f32(&self) -> Result<Vec<f32>, String> {
        match self.data_type {
            FLOAT if !self.raw_data.is_empty() => {
                if self.raw_data.len() % 4 != 0 {
                    return Err("raw_data is not a whole number of floats".into());
                }
                Ok(self
                    .raw_data
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect())
            }
            FLOAT => Ok(self.float_data.clone()),
            FLOAT16 if !self.raw_data.is_empty() => Ok(self
                .raw_data
                .chunks_exact(2)
                .map(|b| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
                .collect()),
            FLOAT16 => Ok(self
                .int32_data
                .iter()
                .map(|&v| half::f16::from_bits(v as u16).to_f32())
                .collect()),
            INT64 if !self.raw_data.is_empty() => Ok(self
                .raw_data
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f32)
                .collect()),
            INT64 => Ok(self.int64_data.iter().map(|&v| v as f32).collect()),
            t => Err(format!(
                "data type {t} is not supported (float, float16, int64 are)"
            )),
        }
    }

    /// A FLOAT tensor (for writing test models).
    pub fn float(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
        TensorProto {
            dims: dims.to_vec(),
            data_type: FLOAT,
            float_data: Vec::new(),
            int32_data: Vec::new(),
            int64_data: Vec::new(),
            name: name.into(),
            raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }
}

impl ValueInfoProto {
    /// A float tensor value with fixed dims (for writing test models).
    pub fn float(name: &str, dims: &[i64]) -> ValueInfoProto {
        ValueInfoProto {
            name: name.into(),
            r#type: Some(TypeProto {
                tensor_type: Some(TypeProtoTensor {
                    elem_type: FLOAT,
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| Dimension {
                                value: Some(dimension::Value::DimValue(d)),
                            })
                            .collect(),
                    }),
                }),
            }),
        }
    }

    /// The fixed dims, or why there are none.
    pub fn dims(&self) -> Result<Vec<usize>, String> {
        let t = self
            .r#type
            .as_ref()
            .and_then(|t| t.tensor_type.as_ref())
            .ok_or("has no tensor type")?;
        if t.elem_type != FLOAT && t.elem_type != FLOAT16 {
            return Err(format!(
                "element type {} is not float or float16",
                t.elem_type
            ));
        }
        let s = t.shape.as_ref().ok_or("has no shape")?;
        s.dim
            .iter()
            .map(|d| match &d.value {
                Some(dimension::Value::DimValue(v)) if *v > 0 => Ok(*v as usize),
                Some(dimension::Value::DimParam(p)) => Err(format!(
                    "dimension '{p}' is symbolic; fix it (e.g. the batch) before compiling"
                )),
                _ => Err("has a dimension without a value".to_string()),
            })
            .collect()
    }
}

impl NodeProto {
    /// Attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attribute.iter().find(|a| a.name == name)
    }

    /// Integer attribute `name`, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map_or(default, |a| a.i)
    }

    /// Float attribute `name`, or `default`.
    pub fn float(&self, name: &str, default: f32) -> f32 {
        self.attr(name).map_or(default, |a| a.f)
    }

    /// Integer-list attribute `name`, if present.
    pub fn ints(&self, name: &str) -> Option<&[i64]> {
        self.attr(name).map(|a| a.ints.as_slice())
    }
}

/// Decodes a model.
pub fn decode(bytes: &[u8]) -> Result<ModelProto, prost::DecodeError> {
    ModelProto::decode(bytes)
}
