//! The delegation chains of a case: every path through the delegation edges from an event
//! nothing delegated to, bounded by [`MAX_CHAINS`].

use std::collections::{BTreeMap, BTreeSet};

use afr_core::{RecorderId, verify::Outcome};

use super::{Known, MAX_CHAINS, Step};
use crate::Trust;

/// An event, by recorder and sequence number.
pub(super) type Node = (RecorderId, u64);

/// The chain's edges, delegating event to delegated one: how each is known (`parent_event`,
/// `delegated_to`, `same-log`) and the worst answer of the links that make it.
pub(super) type Edges = BTreeMap<(Node, Node), (BTreeSet<&'static str>, Option<Outcome>)>;

/// The delegation chains: every path from an event no edge leads to, at most [`MAX_CHAINS`].
pub(super) fn chains(
    edges: &Edges,
    known: &BTreeMap<Node, Known>,
    trust: &Trust,
) -> Vec<Vec<Step>> {
    let mut next: BTreeMap<Node, Vec<(Node, String, Option<Outcome>)>> = BTreeMap::new();
    let mut has_parent: BTreeSet<Node> = BTreeSet::new();
    let mut nodes: BTreeSet<Node> = BTreeSet::new();
    for ((from, to), (via, status)) in edges {
        if from == to {
            continue;
        }
        let via: Vec<&str> = via.iter().copied().collect();
        next.entry(*from)
            .or_default()
            .push((*to, via.join("+"), *status));
        has_parent.insert(*to);
        nodes.insert(*from);
        nodes.insert(*to);
    }
    let step = |n: Node, via: Option<String>, status: Option<Outcome>| Step {
        party: trust
            .parties
            .iter()
            .find(|p| p.recorders.contains(&n.0))
            .map(|p| p.name.clone()),
        recorder: n.0,
        seq: n.1,
        tool: known.get(&n).and_then(|k| k.tool.clone()),
        via,
        status,
    };
    let mut out: Vec<Vec<Step>> = Vec::new();
    let mut seen: BTreeSet<Node> = BTreeSet::new();
    // Roots first, then whatever only a cycle reaches.
    let starts: Vec<Node> = nodes
        .iter()
        .filter(|n| !has_parent.contains(n))
        .chain(nodes.iter().filter(|n| has_parent.contains(n)))
        .copied()
        .collect();
    for s in starts {
        if seen.contains(&s) || out.len() >= MAX_CHAINS {
            continue;
        }
        // Depth-first, one path at a time; a node already on the path ends it (a cycle).
        let mut path: Vec<(Node, usize)> = vec![(s, 0)];
        let mut on_path: BTreeSet<Node> = BTreeSet::from([s]);
        let mut steps: Vec<Step> = vec![step(s, None, None)];
        seen.insert(s);
        while let Some(&(n, i)) = path.last() {
            if out.len() >= MAX_CHAINS {
                break;
            }
            let succ = next.get(&n).map_or(&[][..], Vec::as_slice);
            if i == 0 && succ.iter().all(|(m, _, _)| on_path.contains(m)) {
                out.push(steps.clone());
            }
            match succ.get(i) {
                Some((m, via, status)) => {
                    if let Some(top) = path.last_mut() {
                        top.1 += 1;
                    }
                    if on_path.insert(*m) {
                        seen.insert(*m);
                        path.push((*m, 0));
                        steps.push(step(*m, Some(via.clone()), *status));
                    }
                }
                None => {
                    path.pop();
                    on_path.remove(&n);
                    steps.pop();
                }
            }
        }
    }
    out
}
