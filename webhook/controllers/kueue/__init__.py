"""The leader's controllers for Kueue MultiKueue: the carbon dispatcher, the carbon
window admission check, and the manager's watched caches they share."""
