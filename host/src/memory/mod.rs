//! Long-term memory in the host: the `memory` slot, the tools the model is offered, and the
//! built-in `memory-core` engine over `rampart-memory`.

pub mod slot;
pub mod tools;
