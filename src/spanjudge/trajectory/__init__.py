"""Steps, assembled trajectories and their statistics."""
