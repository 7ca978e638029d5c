//! The importer's one error type: what went wrong and where (the node, its operator).

/// Why a model cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The bytes are not an ONNX model.
    #[error("not an ONNX model: {0}")]
    Decode(String),
    /// Something about the model as a whole (opset, inputs, outputs).
    #[error("{0}")]
    Model(String),
    /// A node kfoundry reads but cannot import as it is (an attribute, a shape, a data type).
    #[error("node `{node}` ({op}): {message}")]
    Node {
        node: String,
        op: String,
        message: String,
    },
    /// A node whose operator kfoundry does not import; `supported` lists those it does
    /// (`graph::SUPPORTED`).
    #[error("node `{node}`: operator `{op}` is not supported; supported operators: {}", supported.join(", "))]
    Unsupported {
        node: String,
        op: String,
        supported: &'static [&'static str],
    },
}

impl ImportError {
    pub(crate) fn node(node: &str, op: &str, message: impl Into<String>) -> ImportError {
        // The message may quote the model's text (names, attribute strings): printable only.
        ImportError::Node {
            node: node.to_string(),
            op: crate::text::printable(op, 80),
            message: crate::text::printable(&message.into(), 2000),
        }
    }
}
