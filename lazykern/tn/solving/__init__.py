"""The engine of :func:`lazykern.tn.solve`, one module per property family: the shared context
(planning, transfers, contraction), size values and their dtypes, sizes and counts, the graph
polynomial, the partition function, small components solved apart, and configurations."""
