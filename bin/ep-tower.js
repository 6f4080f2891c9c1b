#!/usr/bin/env node
import "../dist/tower/main.js";
