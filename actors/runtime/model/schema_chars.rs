//! The characters of tool schemas a token estimate counts, without writing them out.

use super::ToolSchema;

/// The characters of `tools` a token estimate counts: each name, description and the compact
/// JSON text of its parameters. A tool set counts its schemas once, when it builds them, not on
/// every model call.
pub(crate) fn schema_chars(tools: &[ToolSchema]) -> usize {
    tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + json_len(&t.parameters))
        .sum()
}

/// The length of `value`'s compact JSON text (`value.to_string().len()`), counted as it is
/// written, without building the text.
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, nor can serialising a `Value` (its keys are strings).
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_length_of_the_compact_text() {
        let value = serde_json::json!({
            "type": "object",
            "properties": { "path": { "type": "string", "description": "a \"quoted\" é\n" } },
            "required": ["path"], "n": 12.5, "m": -3, "b": true, "z": null
        });
        assert_eq!(json_len(&value), value.to_string().len());
    }
}
