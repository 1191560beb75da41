//! Generic REST machinery over the objects of every kind.

pub mod apply;
