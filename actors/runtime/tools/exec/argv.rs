//! A command line into argv, the way a POSIX shell would split it, without running a shell:
//! quotes and backslashes are honoured, nothing is expanded, and every shell operator is
//! reported so the caller can refuse it. Also the canonical (quoted) form of an argv and the
//! globs allowlist entries use.

/// A split command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Parsed {
    /// The words, quotes removed.
    pub words: Vec<String>,
    /// Shell operators found outside single quotes, in order (`;`, `&&`, `|`, `>`, `$(`, …).
    pub operators: Vec<String>,
}

/// Why a command line cannot be split.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ParseError {
    /// A `'` without its closing `'`.
    #[error("unterminated single quote")]
    SingleQuote,
    /// A `"` without its closing `"`.
    #[error("unterminated double quote")]
    DoubleQuote,
    /// A `\` with nothing after it.
    #[error("trailing backslash")]
    TrailingBackslash,
    /// A NUL byte, which no argument can hold.
    #[error("NUL byte in the command")]
    Nul,
}

/// Splits `line` into words and reports operators. Operators separate words, like white space.
pub(crate) fn parse(line: &str) -> Result<Parsed, ParseError> {
    if line.contains('\0') {
        return Err(ParseError::Nul);
    }
    let mut out = Parsed::default();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    let finish = |word: &mut Option<String>, out: &mut Parsed| {
        if let Some(w) = word.take() {
            out.words.push(w);
        }
    };
    while let Some(c) = chars.next() {
        let op = |s: &str, word: &mut Option<String>, out: &mut Parsed| {
            finish(word, out);
            out.operators.push(s.to_string());
        };
        match c {
            ' ' | '\t' => finish(&mut word, &mut out),
            '\n' | '\r' => op("newline", &mut word, &mut out),
            '\\' => match chars.next() {
                None => return Err(ParseError::TrailingBackslash),
                Some('\n') => {}
                Some(x) => word.get_or_insert_default().push(x),
            },
            '\'' => {
                let w = word.get_or_insert_default();
                loop {
                    match chars.next() {
                        None => return Err(ParseError::SingleQuote),
                        Some('\'') => break,
                        Some(x) => w.push(x),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_default();
                loop {
                    match chars.next() {
                        None => return Err(ParseError::DoubleQuote),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            None => return Err(ParseError::DoubleQuote),
                            Some('\n') => {}
                            Some(x @ ('"' | '\\' | '$' | '`')) => w.push(x),
                            Some(x) => {
                                w.push('\\');
                                w.push(x);
                            }
                        },
                        Some('`') => {
                            out.operators.push("`".into());
                            w.push('`');
                        }
                        Some('$') if chars.peek() == Some(&'(') => {
                            out.operators.push("$(".into());
                            w.push('$');
                        }
                        Some(x) => w.push(x),
                    }
                }
            }
            ';' | '&' | '|' | '<' | '>' => {
                let mut s = c.to_string();
                while let Some(&n) = chars.peek() {
                    if matches!(n, '&' | '|' | '<' | '>' | ';' | '(') && s.len() < 3 {
                        s.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                op(&s, &mut word, &mut out);
            }
            '(' | ')' | '`' => op(&c.to_string(), &mut word, &mut out),
            '$' if chars.peek() == Some(&'(') => {
                chars.next();
                op("$(", &mut word, &mut out);
            }
            '#' if word.is_none() => {
                op("#", &mut word, &mut out);
                break;
            }
            x => word.get_or_insert_default().push(x),
        }
    }
    finish(&mut word, &mut out);
    Ok(out)
}

/// `word` as a shell would need it written: unchanged when it holds only safe characters,
/// otherwise in single quotes; a word with control or bidi-override characters is written
/// `$'…'` with those escaped, so the result is one printable line that cannot redraw a terminal
/// or hide part of the command from the person reading it.
pub(crate) fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if safe {
        word.to_string()
    } else if word.chars().any(hidden) {
        let mut out = String::from("$'");
        for c in word.chars() {
            match c {
                '\\' => out.push_str(r"\\"),
                '\'' => out.push_str(r"\'"),
                '\n' => out.push_str(r"\n"),
                '\r' => out.push_str(r"\r"),
                '\t' => out.push_str(r"\t"),
                c if hidden(c) && (c as u32) < 0x80 => {
                    out.push_str(&format!(r"\x{:02x}", c as u32))
                }
                c if hidden(c) => out.push_str(&format!(r"\u{:04X}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('\'');
        out
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Control characters and the bidi embeddings, overrides and isolates (U+202A–U+202E,
/// U+2066–U+2069): they change how a line displays without showing themselves.
fn hidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The canonical command line of `argv`: each word [`quote`]d, joined by single spaces. This is
/// what allowlist globs are matched against and what approvals show.
pub(crate) fn canonical(argv: &[String]) -> String {
    argv.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

/// Whether `text` matches `pattern`: `*` any run of characters (spaces and `/` included), `?` one
/// character, `\x` the character `x`; everything else itself.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was and the text position it is currently taken to reach.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some('?') => {
                pi += 1;
                ti += 1;
                continue;
            }
            Some('\\') if p.get(pi + 1) == Some(&t[ti]) => {
                pi += 2;
                ti += 1;
                continue;
            }
            Some(&c) if c != '\\' && c == t[ti] => {
                pi += 1;
                ti += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// `text` as a glob that matches exactly `text`.
pub(crate) fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
