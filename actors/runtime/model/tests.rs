//! Unit tests of the model clients: the SSE parser, the OpenAI client against the scripted
//! loopback server, and the scripted rules model.

mod anthropic;
pub(crate) mod fallback;
mod images;
mod openai;
pub(crate) mod params;
mod scripted;
mod sse;
