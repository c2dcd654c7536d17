//! What a router learnt, as stored across restarts and read back.

use super::{Belief, Mean, PRIOR, Router, Stored};

impl Router {
    /// Everything learnt, to store.
    pub fn export(&self) -> Vec<Stored> {
        let mut out = Vec::new();
        for (task, arms) in self.tasks() {
            for (group, arm) in self.candidates.iter().zip(&arms) {
                out.push(Stored {
                    task: task.to_string(),
                    group: group.to_string(),
                    belief: arm.belief,
                    output: arm.output.get(),
                    cached: arm.cached.get(),
                });
            }
        }
        out
    }

    /// Takes back what was stored; entries of groups no longer candidates are left out.
    /// Returns how many were taken.
    pub fn restore(&mut self, stored: &[Stored]) -> usize {
        let mut taken = 0;
        for s in stored {
            let Some(i) = self.candidates.iter().position(|c| **c == *s.group) else {
                continue;
            };
            let task = self.task_key(Some(&s.task));
            let arm = &mut self.arms(&task)[i];
            arm.belief = Belief {
                alpha: s.belief.alpha.max(PRIOR),
                beta: s.belief.beta.max(PRIOR),
            };
            arm.output = Mean::of(s.output);
            arm.cached = Mean::of(s.cached);
            taken += 1;
        }
        taken
    }
}
