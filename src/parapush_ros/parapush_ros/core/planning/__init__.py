"""Planning: tasks and costs, outcome rules, optimisers, the MPC planner."""
