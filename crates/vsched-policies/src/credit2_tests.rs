//! credit2 on the hand-driven world (`vsched_model::hand_world`).
