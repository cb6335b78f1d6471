//! Which items go into a request: the whole fresh tail, then older items newest first while
//! they fit, stopping at the first that does not, so what is kept is one contiguous run
//! ending at the tail and the prefix changes only when the budget forces it.

use crate::conv::{Item, Role};

/// The index of the first item to send and the estimated tokens of what is sent. The tail
/// is always sent, even over budget; a tool call and its results are one unit.
pub fn select(items: &[Item], tail: usize, budget: u64) -> (usize, u64) {
    let mut used: u64 = items[tail..].iter().map(|i| i.tokens).sum();
    let mut first = tail;
    while first > 0 {
        let mut start = first - 1;
        while start > 0 && items[start].role == Role::ToolResult && !items[start - 1].is_summary() {
            start -= 1;
        }
        let cost: u64 = items[start..first].iter().map(|i| i.tokens).sum();
        if used + cost > budget {
            break;
        }
        used += cost;
        first = start;
    }
    (first, used)
}
