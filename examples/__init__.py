"""Examples of the Workload control plane: workers doing real work, and the workflows using them."""
