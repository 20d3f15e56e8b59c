"""``carbonshift simulate``: replay real hourly intensity traces through the decision core.

Modules: :mod:`.scenario` (the YAML input), :mod:`.grid` (traces cut to the scenario),
:mod:`.karmada` (Karmada's replica division), :mod:`.policies` (the compared policies,
built on :mod:`webhook.decision`), :mod:`.engine` (the hour-by-hour loops),
:mod:`.metrics` and :mod:`.outcome` (results), :mod:`.report` / :mod:`.plots` (output),
:mod:`.cli` (the sub-command).
"""
