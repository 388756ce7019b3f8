"""The real-agent lab: a mock Anthropic API, a prepared HOME for the real CLI, and a fake agent.

Panewatch classifies what agents draw; this package produces those drawings on demand, with
ground truth beside them (the mock's request log, the fake agent's state file).
"""
