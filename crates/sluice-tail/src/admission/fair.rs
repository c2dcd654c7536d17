//! A lane's queue, fair between tenants: the tenants with someone waiting take turns (deficit
//! round robin where every request costs one slot, the quantum), first come first served
//! within a tenant. One tenant's 200-document batch then delays another tenant's next
//! document by one slot, not by 200.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Waiters by tenant, served in turns.
#[derive(Debug)]
pub struct FairQueue<T> {
    queues: HashMap<Arc<str>, VecDeque<T>>,
    /// Tenants with someone waiting, in the order of their next turn.
    turns: VecDeque<Arc<str>>,
    len: usize,
}

impl<T> Default for FairQueue<T> {
    fn default() -> Self {
        Self {
            queues: HashMap::new(),
            turns: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T> FairQueue<T> {
    /// Adds `item` behind `tenant`'s other waiters; a tenant new to the queue takes its turn
    /// after those already waiting.
    pub fn push(&mut self, tenant: &Arc<str>, item: T) {
        let q = self.queues.entry(tenant.clone()).or_default();
        if q.is_empty() {
            self.turns.push_back(tenant.clone());
        }
        q.push_back(item);
        self.len += 1;
    }

    /// The waiter whose turn it is, without taking it.
    pub fn peek(&self) -> Option<&T> {
        let tenant = self.turns.front()?;
        self.queues.get(tenant)?.front()
    }

    /// Takes the waiter whose turn it is; its tenant's next turn comes after every other
    /// waiting tenant's.
    pub fn pop(&mut self) -> Option<T> {
        let tenant = self.turns.pop_front()?;
        let q = self.queues.get_mut(&tenant)?;
        let item = q.pop_front();
        if q.is_empty() {
            self.queues.remove(&tenant);
        } else {
            self.turns.push_back(tenant);
        }
        if item.is_some() {
            self.len -= 1;
        }
        item
    }

    /// Waiters in all.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nobody waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tenants with someone waiting.
    pub fn tenants(&self) -> usize {
        self.turns.len()
    }

    /// Keeps only the waiters `keep` accepts (the others gave up).
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.queues.retain(|_, q| {
            q.retain(&mut keep);
            !q.is_empty()
        });
        let queues = &self.queues;
        self.turns.retain(|t| queues.contains_key(t));
        self.len = self.queues.values().map(VecDeque::len).sum();
    }

    /// Every waiter, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.queues.values().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn tenants_take_turns_and_each_keeps_its_order() {
        let mut q = FairQueue::default();
        for i in 0..200 {
            q.push(&t("acme"), ("acme", i));
        }
        q.push(&t("globex"), ("globex", 0));
        q.push(&t("globex"), ("globex", 1));
        assert_eq!(q.len(), 202);
        assert_eq!(q.tenants(), 2);
        let first: Vec<_> = (0..5).map(|_| q.pop().unwrap()).collect();
        assert_eq!(
            first,
            [
                ("acme", 0),
                ("globex", 0),
                ("acme", 1),
                ("globex", 1),
                ("acme", 2)
            ]
        );
        assert_eq!(q.tenants(), 1);
        assert_eq!(q.peek(), Some(&("acme", 3)));
        assert_eq!(q.len(), 197);
    }

    #[test]
    fn a_newcomer_waits_for_the_tenants_already_in_line_but_not_for_their_backlog() {
        let mut q = FairQueue::default();
        for i in 0..3 {
            q.push(&t("a"), i);
        }
        q.push(&t("b"), 10);
        assert_eq!(q.pop(), Some(0));
        q.push(&t("c"), 20);
        // b's turn, then a's, then c's.
        assert_eq!(q.pop(), Some(10));
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.pop(), Some(20));
        assert_eq!(q.pop(), Some(2));
        assert_eq!(q.pop(), None);
        assert!(q.is_empty());
    }

    #[test]
    fn retain_drops_waiters_and_tenants_left_with_none() {
        let mut q = FairQueue::default();
        q.push(&t("a"), 1);
        q.push(&t("b"), 2);
        q.push(&t("a"), 3);
        q.retain(|x| *x != 2);
        assert_eq!((q.len(), q.tenants()), (2, 1));
        assert_eq!(q.iter().count(), 2);
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.pop(), Some(3));
    }
}
