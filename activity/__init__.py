"""The activity app: what each person has seen of each conversation, and their conversations by
latest activity with what is new since (the sidebar)."""
