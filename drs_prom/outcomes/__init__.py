"""How a placement is judged: the objectives and their composite score, the reward, and paired intervals."""
