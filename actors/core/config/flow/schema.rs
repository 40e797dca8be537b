//! The JSON Schema subset a node's `output_schema` may use, checked when the flow is loaded and
//! applied to each output: `type` (one or a list), `properties`, `required`,
//! `additionalProperties` (a boolean), `items`, `enum`, `const`, `minItems`, `maxItems`,
//! `minLength`, `maxLength`, `minimum`, `maximum`, and the annotations `title`, `description`,
//! `$schema`. Any other keyword is refused when the flow is checked, so a schema never silently
//! means less than it says.

use serde_json::Value;

const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "object", "array", "null",
];
const KEYWORDS: &str = "type, properties, required, additionalProperties, items, enum, const, minItems, maxItems, minLength, maxLength, minimum, maximum, title, description, $schema";

/// Every problem with `schema` as a schema, each naming its JSON pointer.
pub fn check(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    check_at(schema, "", &mut out);
    out
}

fn check_at(schema: &Value, at: &str, out: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        out.push(format!("{}: a schema must be a table/object", here(at)));
        return;
    };
    for (k, v) in obj {
        let path = format!("{at}/{k}");
        match k.as_str() {
            "type" => {
                let names: Vec<&Value> = match v {
                    Value::Array(a) => a.iter().collect(),
                    v => vec![v],
                };
                for n in names {
                    if !n.as_str().is_some_and(|n| TYPES.contains(&n)) {
                        out.push(format!(
                            "{path}: unknown type {n} (expected one of: {})",
                            TYPES.join(", ")
                        ));
                    }
                }
            }
            "properties" => match v.as_object() {
                Some(props) => {
                    for (name, sub) in props {
                        check_at(sub, &format!("{path}/{name}"), out);
                    }
                }
                None => out.push(format!("{path}: expected a table of schemas")),
            },
            "items" => check_at(v, &path, out),
            "required" => {
                if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
                    out.push(format!("{path}: expected an array of property names"));
                }
            }
            "enum" => {
                if !v.is_array() {
                    out.push(format!("{path}: expected an array of values"));
                }
            }
            "additionalProperties" => {
                if !v.is_boolean() {
                    out.push(format!("{path}: expected true or false"));
                }
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" => {
                if !v.is_u64() {
                    out.push(format!("{path}: expected a non-negative integer"));
                }
            }
            "minimum" | "maximum" => {
                if !v.is_number() {
                    out.push(format!("{path}: expected a number"));
                }
            }
            "const" | "title" | "description" | "$schema" => {}
            other => out.push(format!(
                "{}: unsupported keyword {other:?} (expected one of: {KEYWORDS})",
                here(at)
            )),
        }
    }
}

fn here(at: &str) -> &str {
    if at.is_empty() { "/" } else { at }
}

/// Every way `value` breaks `schema` (a schema [`check`] accepted), each naming its JSON
/// pointer; empty when it conforms.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    validate_at(schema, value, "", &mut out);
    out
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_type(v: &Value, name: &str) -> bool {
    let t = type_of(v);
    t == name || (name == "number" && t == "integer")
}

fn validate_at(schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    let Some(s) = schema.as_object() else { return };
    let at_text = here(at);
    if let Some(t) = s.get("type") {
        let names: Vec<&str> = match t {
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            t => t.as_str().into_iter().collect(),
        };
        if !names.iter().any(|n| is_type(value, n)) {
            out.push(format!(
                "{at_text}: expected {}, got {}",
                names.join(" or "),
                type_of(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(value)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        out.push(format!(
            "{at_text}: {value} is not one of: {}",
            list.join(", ")
        ));
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        out.push(format!("{at_text}: expected {c}, got {value}"));
    }
    match value {
        Value::Object(obj) => {
            if let Some(Value::Array(req)) = s.get("required") {
                for name in req.iter().filter_map(Value::as_str) {
                    if !obj.contains_key(name) {
                        out.push(format!("{at_text}: missing required property {name:?}"));
                    }
                }
            }
            let props = s.get("properties").and_then(Value::as_object);
            for (k, v) in obj {
                match props.and_then(|p| p.get(k)) {
                    Some(sub) => validate_at(sub, v, &format!("{at}/{k}"), out),
                    None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        out.push(format!("{at_text}: property {k:?} is not allowed"));
                    }
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            bound(
                s,
                "minItems",
                "maxItems",
                items.len(),
                "items",
                at_text,
                out,
            );
            if let Some(sub) = s.get("items") {
                for (i, v) in items.iter().enumerate() {
                    validate_at(sub, v, &format!("{at}/{i}"), out);
                }
            }
        }
        Value::String(text) => {
            let n = text.chars().count();
            bound(s, "minLength", "maxLength", n, "characters", at_text, out);
        }
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or_default();
            if let Some(min) = s.get("minimum").and_then(Value::as_f64)
                && f < min
            {
                out.push(format!("{at_text}: {n} is below the minimum {min}"));
            }
            if let Some(max) = s.get("maximum").and_then(Value::as_f64)
                && f > max
            {
                out.push(format!("{at_text}: {n} is above the maximum {max}"));
            }
        }
        _ => {}
    }
}

fn bound(
    s: &serde_json::Map<String, Value>,
    min_key: &str,
    max_key: &str,
    n: usize,
    what: &str,
    at: &str,
    out: &mut Vec<String>,
) {
    let get = |k: &str| s.get(k).and_then(Value::as_u64).map(|v| v as usize);
    if let Some(min) = get(min_key)
        && n < min
    {
        out.push(format!("{at}: {n} {what}, fewer than {min_key} {min}"));
    }
    if let Some(max) = get(max_key)
        && n > max
    {
        out.push(format!("{at}: {n} {what}, more than {max_key} {max}"));
    }
}

/// The JSON value an answer's text holds: the whole text, or the body of a ```json fence in it.
pub fn parse_answer(text: &str) -> Result<Value, String> {
    let t = text.trim();
    let whole = serde_json::from_str::<Value>(t);
    if let Ok(v) = whole {
        return Ok(v);
    }
    let fenced = t
        .split_once("```")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(body, _)| body.trim_start_matches("json").trim());
    match (fenced.map(serde_json::from_str::<Value>), whole) {
        (Some(Ok(v)), _) => Ok(v),
        (Some(Err(e)), _) | (None, Err(e)) => Err(format!("the answer is not valid JSON: {e}")),
        (None, Ok(v)) => Ok(v),
    }
}
