"""Pure rules of the mirror: definitions, naming, planning, generations, offset syncs, errors, reports.

Nothing here talks to a broker or imports a client; every function is a function of plain values.
"""
