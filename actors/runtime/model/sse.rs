//! An incremental Server-Sent Events parser.
//!
//! Bytes arrive in arbitrary chunks (a line, an event, or a UTF-8 character may be split across
//! two chunks); [`SseParser::push`] buffers what it cannot finish yet and returns every event that
//! completed. Lines end with `\n`, `\r\n` or a lone `\r`; `:` lines are comments; several `data:`
//! lines of one event are joined with `\n`; a blank line dispatches the event.
//!
//! A parser made with `SseParser::with_limit` holds at most that many bytes of one line and of
//! one event's data: `SseParser::try_push` fails with [`SseTooLarge`] past it, so a server that
//! sends a line without end (or `data:` lines without the blank line) cannot grow it without bound.

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if the server named the event type.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// What went past the limit of a `SseParser::with_limit` parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseTooLarge {
    /// One line (no `\n` or `\r` yet) is longer than the limit.
    #[error("one line of the event stream passed {0} bytes")]
    Line(usize),
    /// The `data:` lines of one event (no blank line yet) add up to more than the limit.
    #[error("the data of one event of the event stream passed {0} bytes")]
    Event(usize),
}

/// Incremental SSE parser: feed it bytes with [`push`](Self::push) (or
/// `try_push` under a limit), then call [`finish`](Self::finish) at end of
/// stream.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` opening the next chunk belongs to it.
    after_cr: bool,
    /// Data of the event being assembled (each line followed by `\n`).
    data: String,
    /// At least one `data` field was seen for the event being assembled.
    has_data: bool,
    /// `event:` field of the event being assembled.
    event: Option<String>,
    /// The most bytes of one line, and of one event's data.
    limit: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limit(usize::MAX)
    }
}

impl SseParser {
    /// A parser with nothing buffered and no limit: for a trusted source.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that holds at most `limit` bytes of one line and of one event's data.
    pub(crate) fn with_limit(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            data: String::new(),
            has_data: false,
            event: None,
            limit,
        }
    }

    /// Feeds one chunk of bytes and returns the events it completed, in order. For a parser
    /// without a limit; one with a limit returns nothing more once it was passed (use
    /// `try_push` there).
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.try_push(chunk).unwrap_or_default()
    }

    /// Feeds one chunk of bytes and returns the events it completed, in order; fails once a line
    /// or an event's data passes the limit (the events of this chunk are then dropped, and the
    /// stream should be abandoned).
    pub(crate) fn try_push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseTooLarge> {
        let mut out = Vec::new();
        let mut rest = chunk;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.extend_line(&rest[..pos])?;
            let terminator = rest[pos];
            rest = &rest[pos + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.end_line(&mut out)?;
        }
        self.extend_line(rest)?;
        Ok(out)
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseTooLarge> {
        if self.line.len().saturating_add(bytes.len()) > self.limit {
            return Err(SseTooLarge::Line(self.limit));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// Ends the stream: a last line without terminator is processed, and a pending event whose
    /// blank line never came is dispatched anyway (lenient towards servers that close early).
    pub fn finish(&mut self) -> Option<SseEvent> {
        self.try_finish().ok().flatten()
    }

    /// Like [`finish`](Self::finish), failing when the last line passes the limit of the
    /// event's data.
    pub(crate) fn try_finish(&mut self) -> Result<Option<SseEvent>, SseTooLarge> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out)?;
        }
        self.dispatch(&mut out);
        self.after_cr = false;
        Ok(out.pop())
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseTooLarge> {
        let raw = std::mem::take(&mut self.line);
        let line = String::from_utf8_lossy(&raw);
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.data.len().saturating_add(value.len()) >= self.limit {
                    return Err(SseTooLarge::Event(self.limit));
                }
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            // `id` and `retry` matter for reconnecting EventSource clients, not for one POST.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if !self.has_data {
            self.data.clear();
            return;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        out.push(SseEvent { event, data });
    }
}
