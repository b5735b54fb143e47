//! Unit tests of the plan, named after the rule they pin.

mod entries;
mod order;
mod table;
