//! A conversation's turns as a tree.
//!
//! Editing a message or regenerating an answer adds a sibling of a turn
//! instead of replacing it (migration 0017): every turn has a parent
//! turn, and the conversation has a current leaf. What the store keeps is
//! compact and never rewritten: a turn written before its conversation
//! branched has no parent stored (`NULL`: the turn before it, by
//! `turn_index`), one written after names its parent (`""` for a root).
//! This module resolves that into parents, children and branches.

use std::collections::HashMap;

/// One turn's place, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeTurn {
    /// The turn id.
    pub id: String,
    /// Its 0-based position in the conversation, in order of creation.
    pub turn_index: u32,
    /// Its parent as stored (see the module's documentation).
    pub parent_turn_id: Option<String>,
}

/// A conversation's turns, resolved into a tree. Positions (`usize`) are
/// indexes into the turns given, which are oldest first.
#[derive(Debug)]
pub struct TurnTree {
    turns: Vec<TreeTurn>,
    parents: Vec<Option<usize>>,
    /// The children of each turn, oldest first; `roots` for none.
    children: Vec<Vec<usize>>,
    roots: Vec<usize>,
    by_id: HashMap<String, usize>,
}

impl TurnTree {
    /// The tree of `turns`, in any order. A parent that names no turn of
    /// the conversation (which the store never writes) makes a root.
    pub fn new(mut turns: Vec<TreeTurn>) -> Self {
        turns.sort_by_key(|turn| turn.turn_index);
        let by_id: HashMap<String, usize> = turns
            .iter()
            .enumerate()
            .map(|(i, turn)| (turn.id.clone(), i))
            .collect();
        let by_index: HashMap<u32, usize> = turns
            .iter()
            .enumerate()
            .map(|(i, turn)| (turn.turn_index, i))
            .collect();
        let parents: Vec<Option<usize>> = turns
            .iter()
            .map(|turn| match &turn.parent_turn_id {
                None => turn
                    .turn_index
                    .checked_sub(1)
                    .and_then(|before| by_index.get(&before).copied()),
                Some(parent) => by_id.get(parent).copied(),
            })
            .collect();
        let mut children = vec![Vec::new(); turns.len()];
        let mut roots = Vec::new();
        for (i, parent) in parents.iter().enumerate() {
            match parent {
                // A parent is always older; anything else is treated as
                // a root so that no walk can loop.
                Some(p) if *p < i => children[*p].push(i),
                _ => roots.push(i),
            }
        }
        Self {
            turns,
            parents,
            children,
            roots,
            by_id,
        }
    }

    /// The turn at `position`.
    pub fn turn(&self, position: usize) -> &TreeTurn {
        &self.turns[position]
    }

    /// The position of turn `id`.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// The parent of the turn at `position`, when it has one.
    pub fn parent(&self, position: usize) -> Option<usize> {
        self.parents[position].filter(|parent| *parent < position)
    }

    /// The turns that share the parent of the turn at `position` (itself
    /// included), oldest first.
    pub fn siblings(&self, position: usize) -> &[usize] {
        match self.parent(position) {
            Some(parent) => &self.children[parent],
            None => &self.roots,
        }
    }

    /// The last turn of the branch through `position`: its newest reply,
    /// then that one's newest, and so on.
    pub fn newest_leaf(&self, mut position: usize) -> usize {
        while let Some(newest) = self.children[position].last() {
            position = *newest;
        }
        position
    }

    /// The conversation's current leaf: `stored` (the conversation's
    /// `current_leaf`) when it names one of its turns, else its newest
    /// turn; `None` for a conversation without turns.
    pub fn current_leaf(&self, stored: Option<&str>) -> Option<usize> {
        stored
            .and_then(|id| self.position(id))
            .or_else(|| self.turns.len().checked_sub(1))
    }

    /// The branch that ends at `leaf`: its turns from the first message
    /// down to it.
    pub fn branch(&self, leaf: usize) -> Vec<usize> {
        let mut branch = vec![leaf];
        let mut at = leaf;
        while let Some(parent) = self.parent(at) {
            branch.push(parent);
            at = parent;
        }
        branch.reverse();
        branch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, turn_index: u32, parent: Option<&str>) -> TreeTurn {
        TreeTurn {
            id: id.into(),
            turn_index,
            parent_turn_id: parent.map(str::to_owned),
        }
    }

    fn ids(tree: &TurnTree, positions: &[usize]) -> Vec<String> {
        positions.iter().map(|p| tree.turn(*p).id.clone()).collect()
    }

    #[test]
    fn turns_written_before_branching_follow_the_turn_before_them() {
        let tree = TurnTree::new(vec![
            turn("c", 2, None),
            turn("a", 0, None),
            turn("b", 1, None),
        ]);
        let leaf = tree.current_leaf(None).expect("a leaf");
        assert_eq!(ids(&tree, &tree.branch(leaf)), ["a", "b", "c"]);
        assert_eq!(ids(&tree, tree.siblings(leaf)), ["c"]);
        assert_eq!(tree.parent(0), None);
    }

    #[test]
    fn edits_and_regenerations_are_siblings_and_a_switch_follows_the_newest_replies() {
        // a - b - c (old, NULL parents), then b regenerated as d, whose
        // branch goes on with e; then the first message edited (f, a root).
        let tree = TurnTree::new(vec![
            turn("a", 0, None),
            turn("b", 1, None),
            turn("c", 2, None),
            turn("d", 3, Some("a")),
            turn("e", 4, Some("d")),
            turn("f", 5, Some("")),
        ]);
        let b = tree.position("b").expect("b");
        let d = tree.position("d").expect("d");
        assert_eq!(ids(&tree, tree.siblings(b)), ["b", "d"]);
        assert_eq!(ids(&tree, tree.siblings(d)), ["b", "d"]);
        assert_eq!(
            ids(&tree, &tree.branch(tree.newest_leaf(b))),
            ["a", "b", "c"]
        );
        assert_eq!(
            ids(&tree, &tree.branch(tree.newest_leaf(d))),
            ["a", "d", "e"]
        );
        let f = tree.position("f").expect("f");
        assert_eq!(ids(&tree, tree.siblings(f)), ["a", "f"]);
        assert_eq!(ids(&tree, &tree.branch(f)), ["f"]);
        // The stored leaf wins over the newest turn.
        assert_eq!(tree.current_leaf(Some("c")), tree.position("c"));
        assert_eq!(tree.current_leaf(Some("gone")), Some(f));
    }

    #[test]
    fn a_parent_that_is_not_older_cannot_make_a_loop() {
        let tree = TurnTree::new(vec![turn("a", 0, Some("b")), turn("b", 1, Some("a"))]);
        assert_eq!(ids(&tree, &tree.branch(1)), ["a", "b"]);
        assert_eq!(ids(&tree, &tree.branch(0)), ["a"]);
    }
}
