//! Context-window and tool-result guards (in progress).
