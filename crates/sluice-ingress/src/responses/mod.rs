//! OpenAI Responses (`POST /v1/responses`), the stateless subset: requests to the internal
//! form, answers and streams back. Errors keep OpenAI's shape, as the Responses API does.

pub mod answer;
pub mod request;
pub mod stream;

pub use answer::from_chat;
pub use request::to_chat;
pub use stream::Restream;

#[cfg(test)]
mod tests;
