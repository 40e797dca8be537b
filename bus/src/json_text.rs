//! Compact JSON text of strings and `serde_json` values, byte for byte what
//! `serde_json::to_writer` writes for them, without its escape loop.
//!
//! serde_json looks every byte of a string up in its escape table one at a time (about ten
//! instructions a byte). A task's payload goes into its record and its fingerprint, and its
//! result into the record again, so a task's text was walked that way three times. Here a string
//! is checked 16 bytes at a time (folded over every byte without an early exit, which the
//! compiler turns into vector compares), copied in runs, and escaped as serde escapes: `"` and
//! `\` with a backslash, `\b` `\t` `\n` `\f` `\r` by name, the other control bytes as `\u00xx`
//! (lower-case hex); nothing else (not `/`, not DEL, not non-ASCII). Integers are written by
//! `itoa` and floats by their `Display`, as serde_json writes them.
//! A test holds all of it to serde's bytes.

use serde_json::Value;

/// Whether serde_json escapes `b` inside a string.
fn escaped(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// `s` as a JSON string, quotes included.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    const CHUNK: usize = 16;
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Most strings (ids, topics, names) need nothing: one pass over all of them says so.
    if !bytes.iter().fold(false, |any, &b| any | escaped(b)) {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    // `run` is where the bytes not yet copied start. A chunk with something to escape is
    // walked byte by byte, once; the next chunk is checked whole again.
    let mut run = 0;
    for (n, chunk) in bytes.chunks(CHUNK).enumerate() {
        if !chunk.iter().fold(false, |any, &b| any | escaped(b)) {
            continue;
        }
        let start = n * CHUNK;
        for (i, &b) in chunk.iter().enumerate() {
            if escaped(b) {
                out.extend_from_slice(&bytes[run..start + i]);
                escape(out, b);
                run = start + i + 1;
            }
        }
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// The escape serde_json writes for `b` (one of [`escaped`]'s bytes).
fn escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let named = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x09 => b't',
        0x0a => b'n',
        0x0c => b'f',
        0x0d => b'r',
        _ => {
            let unicode = [
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ];
            out.extend_from_slice(&unicode);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', named]);
}

/// `value` as compact JSON, object members in the map's own order (as serde writes them).
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
    write(out, value, false);
}

/// `value` as canonical JSON: [`write_value`]'s text with every object's members sorted by name
/// (not trusted to the map: its order is serde_json's choice, and a feature of any crate in the
/// build can make it keep insertion order).
pub(crate) fn write_canonical(out: &mut Vec<u8>, value: &Value) {
    write(out, value, true);
}

fn write(out: &mut Vec<u8>, value: &Value, sorted: bool) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item, sorted);
            }
            out.push(b']');
        }
        Value::Object(map) if sorted => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            write_members(out, members.into_iter(), sorted);
        }
        Value::Object(map) => write_members(out, map.iter(), sorted),
    }
}

fn write_members<'a>(
    out: &mut Vec<u8>,
    members: impl Iterator<Item = (&'a String, &'a Value)>,
    sorted: bool,
) {
    out.push(b'{');
    for (i, (name, item)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, name);
        out.push(b':');
        write(out, item, sorted);
    }
    out.push(b'}');
}

/// `n` as serde_json writes it: an integer by `itoa` (serde's own), a float by its `Display`,
/// which is serde's float writer (a `Number` is always finite).
pub(crate) fn write_number(out: &mut Vec<u8>, n: &serde_json::Number) {
    let mut digits = itoa::Buffer::new();
    if let Some(u) = n.as_u64() {
        out.extend_from_slice(digits.format(u).as_bytes());
    } else if let Some(i) = n.as_i64() {
        out.extend_from_slice(digits.format(i).as_bytes());
    } else {
        out.extend_from_slice(n.to_string().as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write_value(&mut out, value);
        out
    }

    #[test]
    fn every_byte_of_a_string_is_written_as_serde_writes_it() {
        // Each control byte, the two escaped characters, DEL, `/`, and non-ASCII, at every
        // position around the 16-byte chunks.
        let mut specials: Vec<String> = (0u8..0x20).map(|b| char::from(b).to_string()).collect();
        specials.extend(["\"", "\\", "/", "\u{7f}", "é", "日本", "🦀"].map(String::from));
        for special in &specials {
            for before in [0, 1, 7, 15, 16, 17, 31, 40] {
                for after in [0, 1, 15, 16, 33] {
                    let s = format!("{}{special}{}", "a".repeat(before), "b".repeat(after));
                    let mut out = Vec::new();
                    write_str(&mut out, &s);
                    assert_eq!(out, serde_json::to_vec(&s).unwrap(), "{s:?}");
                }
            }
        }
        let mixed = "line one\nline \"two\"\t\\ end\r\n\u{1}\u{1f}".repeat(9);
        let mut out = Vec::new();
        write_str(&mut out, &mixed);
        assert_eq!(out, serde_json::to_vec(&mixed).unwrap());
    }

    #[test]
    fn every_kind_of_value_is_written_as_serde_writes_it() {
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-1),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(0.1),
            json!(-0.0),
            json!(1e20),
            json!(1.5e-7),
            json!(123_456.789),
            json!(f64::MAX),
            json!(f64::MIN_POSITIVE),
            json!(""),
            json!("plain text, longer than sixteen bytes"),
            json!([]),
            json!({}),
            json!([1, "two", [3.5, null], { "k": false }]),
            json!({ "z": 1, "a": { "nested\n": ["x\"y", -2.25] }, "m": [] , "é": "ü" }),
        ];
        for value in &values {
            assert_eq!(text(value), serde_json::to_vec(value).unwrap(), "{value}");
            // serde_json's maps are sorted in this build, so its text is the canonical one too.
            let mut canonical = Vec::new();
            write_canonical(&mut canonical, value);
            assert_eq!(canonical, serde_json::to_vec(value).unwrap(), "{value}");
        }
    }
}
