//! Unit tests of the model clients: the SSE parser, the OpenAI client against the scripted
//! loopback server, and the scripted rules model.

mod anthropic;
mod fallback;
mod openai;
mod params;
mod scripted;
mod sse;
