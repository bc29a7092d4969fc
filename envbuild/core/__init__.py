"""The values every stage passes around: versions, specifiers, the request and the resolved
stack (model), the typed vocabulary of the matrices (values), memory sizes, named package
sets and the spec/fleet field validators. Nothing here reads a file other than the compiled
matrices, runs a process or talks to the network."""
