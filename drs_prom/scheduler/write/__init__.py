"""The binding cycle's writes: Bindings, events and pod conditions, volume pre-binding, the rate limits of the API
client, the bind workers and the child process that makes the writes off the scheduler's GIL.
"""
