package rig

// RepoRoot is the checkout's root, seen from a test package's directory
// (test/<package>).
const RepoRoot = "../.."
