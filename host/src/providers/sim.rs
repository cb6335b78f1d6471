//! PLACEHOLDER: lands with the providers work.
