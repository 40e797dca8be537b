//! A small validator for the subset of JSON Schema the tools use.

use serde_json::Value;

/// The JSON kind of `value`, for messages (`string`, `integer`, `object`…).
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks `value` against `schema`. Supports `type` (object, string, integer, number, boolean,
/// array, null), `properties`, `required`, `additionalProperties: false`, `minimum`, `enum` and
/// `items`; other keywords are ignored. A `null` given for an optional property counts as absent.
/// The error names the field: `missing required field "path"`.
pub(crate) fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "")
}

fn check(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let subject = || {
        if at.is_empty() {
            "arguments".to_string()
        } else {
            format!("field {at:?}")
        }
    };
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let fits = match expected {
            "object" => value.is_object(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "null" => value.is_null(),
            _ => true,
        };
        if !fits {
            return Err(format!(
                "{} must be {} {expected}, got {}",
                subject(),
                article(expected),
                kind(value)
            ));
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(format!(
            "{} must be one of {}, got {value}",
            subject(),
            list.join(", ")
        ));
    }
    if let (Some(min), Some(n)) = (
        schema.get("minimum").and_then(Value::as_f64),
        value.as_f64(),
    ) && n < min
    {
        return Err(format!(
            "{} must be >= {}, got {value}",
            subject(),
            schema["minimum"]
        ));
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, item) in array.iter().enumerate() {
            check(items, item, &format!("{at}[{i}]"))?;
        }
    }
    if let Some(object) = value.as_object() {
        check_object(schema, object, at)?;
    }
    Ok(())
}

fn check_object(
    schema: &Value,
    object: &serde_json::Map<String, Value>,
    at: &str,
) -> Result<(), String> {
    let join = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for key in &required {
        if object.get(*key).is_none_or(Value::is_null) {
            return Err(format!("missing required field {:?}", join(key)));
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (key, item) in object {
        match properties.and_then(|p| p.get(key)) {
            Some(_) if item.is_null() && !required.contains(&key.as_str()) => {}
            Some(sub) => check(sub, item, &join(key))?,
            None if closed => {
                let expected: Vec<&str> = properties
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                return Err(format!(
                    "unknown field {:?} (expected: {})",
                    join(key),
                    expected.join(", ")
                ));
            }
            None => {}
        }
    }
    Ok(())
}

fn article(kind: &str) -> &'static str {
    match kind.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}
