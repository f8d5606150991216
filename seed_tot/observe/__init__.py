"""What a run leaves behind: metrics, JSON traces, their text view and plots."""
