"""Errors the front end reports to the user as one clear line (CLI: exit code 2)."""


class UserError(Exception):
    pass
