//! Trees of work as the store records them: every child task names its parent on its envelope.

use crate::origin::Origin;
use bus::TaskRecord;
use std::collections::HashMap;
use uuid::Uuid;

/// The task that started this one, from the origin on its envelope.
pub fn parent_of(record: &TaskRecord) -> Option<Uuid> {
    Origin::of(&record.envelope)
        .ok()
        .and_then(|o| o.parent_task)
}

/// The tasks started by `root` and by their children, depth first, with their depth.
pub fn descendants(all: &[TaskRecord], root: Uuid) -> Vec<(usize, &TaskRecord)> {
    let mut children: HashMap<Uuid, Vec<&TaskRecord>> = HashMap::new();
    for r in all {
        if let Some(parent) = parent_of(r) {
            children.entry(parent).or_default().push(r);
        }
    }
    let mut out = Vec::new();
    let mut stack: Vec<(usize, Uuid)> = vec![(0, root)];
    while let Some((depth, id)) = stack.pop() {
        for child in children.get(&id).into_iter().flatten().rev() {
            out.push((depth + 1, *child));
            stack.push((depth + 1, child.task_id));
        }
    }
    out
}
