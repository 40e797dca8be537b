//! Unit tests of the model clients: the SSE parser, the OpenAI client against the scripted
//! loopback server, and the scripted rules model.

mod openai;
mod scripted;
mod sse;
