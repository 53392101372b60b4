"""Disaggregated prefill / decode serving: the roles, the KV link, and the decision.

link.py (the KV transfer), rules.py (what the engines' connectors accept), roles.py (each
role under load), sizing.py (role layouts and the best pair), decide.py (aggregated or
disaggregated, and why). plan() calls decide.plan_serving for a request whose serving mode
is not aggregated.
"""
