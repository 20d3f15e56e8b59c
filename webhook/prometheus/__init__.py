"""Reading a Prometheus: instant queries and the energy Kepler measures."""
