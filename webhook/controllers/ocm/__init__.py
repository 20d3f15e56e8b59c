"""The leader's controllers for Open Cluster Management: the carbon placement scores."""
