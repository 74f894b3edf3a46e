"""The console's accounts: signing in and out, the organizations a user may open, and
the changes a user makes to their keys."""
