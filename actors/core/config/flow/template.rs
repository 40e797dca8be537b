//! The small languages inside a flow file: prompt templates (`{{inputs.topic}}`,
//! `{{research.output}}`, `{{review.output.verdict}}`, `{{item}}`) and `when` conditions
//! (`review.output.verdict == "fail" && inputs.revise == true`).

use serde::{Deserialize, Serialize};

/// A value a template or a condition names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ref", rename_all = "snake_case")]
pub enum Ref {
    /// `inputs.<name>[.field…]`: a flow input.
    Input {
        /// The input's name.
        name: String,
        /// Fields below it.
        path: Vec<String>,
    },
    /// `<node>.output[.field…]`: an upstream node's output (a field of its JSON output).
    Output {
        /// The node.
        node: String,
        /// Fields below the output.
        path: Vec<String>,
    },
    /// `<node>.error`: an upstream node's error (empty when it did not fail).
    Error {
        /// The node.
        node: String,
    },
    /// `<node>.state`: an upstream node's state (`succeeded`, `failed`, `skipped` …).
    State {
        /// The node.
        node: String,
    },
    /// `item[.field…]`: the item of a `for_each` node.
    Item {
        /// Fields below the item.
        path: Vec<String>,
    },
}

impl Ref {
    /// The node it names, if any.
    pub fn node(&self) -> Option<&str> {
        match self {
            Self::Output { node, .. } | Self::Error { node } | Self::State { node } => Some(node),
            _ => None,
        }
    }

    /// Parses a dotted reference (`research.output.summary`); the error says what is expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let parts: Vec<&str> = text.split('.').map(str::trim).collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!("reference {text:?} has an empty part ({EXPECTED})"));
        }
        let rest = |from: usize| parts[from..].iter().map(|s| s.to_string()).collect();
        match parts.as_slice() {
            ["inputs", name, ..] => Ok(Self::Input {
                name: name.to_string(),
                path: rest(2),
            }),
            ["item", ..] => Ok(Self::Item { path: rest(1) }),
            [node, "output", ..] => Ok(Self::Output {
                node: node.to_string(),
                path: rest(2),
            }),
            [node, "error"] => Ok(Self::Error {
                node: node.to_string(),
            }),
            [node, "state"] => Ok(Self::State {
                node: node.to_string(),
            }),
            _ => Err(format!("unknown reference {text:?} ({EXPECTED})")),
        }
    }
}

const EXPECTED: &str =
    "expected inputs.<name>, <node>.output[.<field>], <node>.error, <node>.state or item[.<field>]";

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Text as written.
    Text(String),
    /// A `{{…}}` reference.
    Ref(Ref),
}

/// A parsed prompt template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    /// Its pieces in order.
    pub parts: Vec<Part>,
}

/// A problem inside a template or condition, at a byte offset into its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextError {
    /// Byte offset into the text.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl Template {
    /// Parses `text`; every reference with its byte offset comes back for the checks.
    pub fn parse(text: &str) -> Result<(Self, Vec<(Ref, usize)>), TextError> {
        let mut parts = Vec::new();
        let mut refs = Vec::new();
        let mut rest = text;
        let mut at = 0;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            let inner_start = open + 2;
            let Some(close) = rest[inner_start..].find("}}") else {
                return Err(TextError {
                    offset: at + open,
                    message: "\"{{\" is never closed (expected \"}}\" after the reference)".into(),
                });
            };
            let inner = &rest[inner_start..inner_start + close];
            let r = Ref::parse(inner).map_err(|message| TextError {
                offset: at + inner_start,
                message,
            })?;
            refs.push((r.clone(), at + inner_start));
            parts.push(Part::Ref(r));
            let next = inner_start + close + 2;
            at += next;
            rest = &rest[next..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok((Self { parts }, refs))
    }

    /// The template as one string, each reference answered by `value`.
    pub fn render(&self, mut value: impl FnMut(&Ref) -> String) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Ref(r) => out.push_str(&value(r)),
            }
        }
        out
    }
}

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operand {
    /// A referenced value.
    Ref(Ref),
    /// A JSON literal (`"fail"`, `true`, `3`, `null`).
    Literal(serde_json::Value),
}

/// How two operands are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

/// One clause of a condition: a comparison, or one operand that must be truthy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clause {
    /// The left side (alone: must be truthy — not null, false, 0, "" or empty).
    pub left: Operand,
    /// The comparison and the right side.
    pub right: Option<(Op, Operand)>,
}

/// A `when` condition: clauses joined by `&&`, all of which must hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// The condition as written (for the skip reason).
    pub text: String,
    /// Its clauses.
    pub clauses: Vec<Clause>,
}

impl Condition {
    /// Parses `text`; every reference with its byte offset comes back for the checks.
    pub fn parse(text: &str) -> Result<(Self, Vec<(Ref, usize)>), TextError> {
        let mut clauses = Vec::new();
        let mut refs = Vec::new();
        let mut at = 0;
        for piece in text.split("&&") {
            let clause = match ["==", "!="]
                .iter()
                .find_map(|op| piece.find(op).map(|i| (i, *op)))
            {
                Some((i, op)) => {
                    let left = operand(&piece[..i], at, &mut refs)?;
                    let right = operand(&piece[i + 2..], at + i + 2, &mut refs)?;
                    let op = if op == "==" { Op::Eq } else { Op::Ne };
                    Clause {
                        left,
                        right: Some((op, right)),
                    }
                }
                None => Clause {
                    left: operand(piece, at, &mut refs)?,
                    right: None,
                },
            };
            clauses.push(clause);
            at += piece.len() + 2;
        }
        Ok((
            Self {
                text: text.trim().to_string(),
                clauses,
            },
            refs,
        ))
    }
}

fn operand(text: &str, at: usize, refs: &mut Vec<(Ref, usize)>) -> Result<Operand, TextError> {
    let lead = text.len() - text.trim_start().len();
    let t = text.trim();
    let offset = at + lead;
    if t.is_empty() {
        return Err(TextError {
            offset,
            message: "empty operand (expected a reference such as review.output.verdict, or a literal such as \"fail\", true or 3)".into(),
        });
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(t) {
        return Ok(Operand::Literal(v));
    }
    if let Some(inner) = t.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        return Ok(Operand::Literal(serde_json::Value::String(inner.into())));
    }
    let bare = t
        .strip_prefix("{{")
        .and_then(|s| s.strip_suffix("}}"))
        .unwrap_or(t);
    let r = Ref::parse(bare).map_err(|message| TextError { offset, message })?;
    refs.push((r.clone(), offset));
    Ok(Operand::Ref(r))
}

/// True for a value a bare condition operand accepts.
pub fn truthy(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => false,
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        serde_json::Value::String(s) => !s.is_empty(),
        serde_json::Value::Array(a) => !a.is_empty(),
        serde_json::Value::Object(o) => !o.is_empty(),
    }
}
