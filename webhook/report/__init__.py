"""``carbonshift report``: energy, emissions, the counterfactual and what was avoided."""
