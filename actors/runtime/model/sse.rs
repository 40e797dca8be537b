//! An incremental Server-Sent Events parser.
//!
//! Bytes arrive in arbitrary chunks (a line, an event, or a UTF-8 character may be split across
//! two chunks); [`SseParser::push`] buffers what it cannot finish yet and returns every event that
//! completed. Lines end with `\n`, `\r\n` or a lone `\r`; `:` lines are comments; several `data:`
//! lines of one event are joined with `\n`; a blank line dispatches the event.

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if the server named the event type.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental SSE parser: feed it bytes with [`push`](Self::push), then call
/// [`finish`](Self::finish) at end of stream.
#[derive(Debug, Default)]
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
}

impl SseParser {
    /// A parser with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one chunk of bytes and returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut rest = chunk;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..pos]);
            let terminator = rest[pos];
            rest = &rest[pos + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.end_line(&mut out);
        }
        self.line.extend_from_slice(rest);
        out
    }

    /// Ends the stream: a last line without terminator is processed, and a pending event whose
    /// blank line never came is dispatched anyway (lenient towards servers that close early).
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out);
        }
        self.dispatch(&mut out);
        self.after_cr = false;
        out.pop()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let raw = std::mem::take(&mut self.line);
        let line = String::from_utf8_lossy(&raw);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            // `id` and `retry` matter for reconnecting EventSource clients, not for one POST.
            _ => {}
        }
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
